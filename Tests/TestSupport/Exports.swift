// Waiting with a deadline and free ports live in LiveDispatchTesting, which
// the benchmarks share; every test target sees them through TestSupport.
@_exported import LiveDispatchTesting
