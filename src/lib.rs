//! Safe retries for Hodoflow-style APIs (work in progress).
