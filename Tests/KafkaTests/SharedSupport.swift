// The shared test support (waiting with a deadline, processes, ports,
// readiness) is used as if it were part of this target.
@_exported import TestSupport
