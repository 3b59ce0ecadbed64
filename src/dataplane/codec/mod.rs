//! The KAIJU1 codec: the binary Golay code through the hexacode (MOG), an exact weighted
//! nearest-point decoder for the Leech lattice Λ24, the Voronoi code Λ24/4Λ24 with its
//! 48-bit index, and the KAIJU1 row format. Byte-level spec: docs/KAIJU1.md.

pub mod golay;
pub mod kaiju1;
pub mod leech;
