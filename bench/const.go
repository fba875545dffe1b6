package bench

// bigEvents is the size of the benchmark session.
const bigEvents = 1_000_000
