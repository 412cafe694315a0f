//! (being written: see docs/LAB.md)
