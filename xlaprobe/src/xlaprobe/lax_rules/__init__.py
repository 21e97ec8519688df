"""xlaprobe's primitives as records: one `PrimitiveDef` per primitive (facts, float64 reference
rule, fuzzer rule, error budget) in family modules (`elementwise`, `special`, `reductions`,
`contractions`, `shapes`, `indexing`, `sorting`, `control`), built from small leaf modules (`facts`,
`numeric`, `opspec`, `budget`, `record`) and collected in `registry`, which the four
per-primitive tables read."""
