@testable import LiveDispatchRules

/// The problems compiling one rule file `name` with `text` reports, as
/// `file:line:column: …` lines; empty when it compiles.
func ruleDiagnostics(_ name: String, _ text: String) -> [String] {
    do {
        _ = try RuleSet.compile(files: [(name, text)])
        return []
    } catch {
        return error.diagnostics.map(\.description)
    }
}
