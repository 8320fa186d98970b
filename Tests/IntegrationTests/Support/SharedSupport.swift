// The shared test support (waiting with a deadline, processes, ports,
// readiness) is used as if it were part of this target.
@_exported import TestSupport
import Foundation

/// Writes `text` to the file `name` in `directory`; returns its path.
func writeFile(_ text: String, _ name: String, in directory: URL) throws -> String {
    let url = directory.appendingPathComponent(name)
    try Data(text.utf8).write(to: url)
    return url.path
}
