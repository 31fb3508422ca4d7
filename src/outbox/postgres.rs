//! The PostgreSQL store (being written on branch outbox-pg).
