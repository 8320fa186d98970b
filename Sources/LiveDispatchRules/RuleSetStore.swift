import LiveDispatchCore
import Synchronization

/// Holds the rule set in force and swaps it atomically on reload. A new set
/// is read and compiled completely first; one with any problem never
/// replaces the current one.
public final class RuleSetStore: Sendable {
    private let state: Mutex<(rules: RuleSet, generation: Int)>

    public init(_ initial: RuleSet) {
        state = Mutex((initial, 1))
    }

    /// Loads the first set from a directory, failing with every problem.
    public convenience init(directory: String) throws(RuleSetError) {
        self.init(try RuleSet.load(directory: directory))
    }

    /// The set in force: take it once per record (or batch) and use it.
    public var current: RuleSet { state.withLock { $0.rules } }

    /// How many sets have been in force, starting at 1.
    public var generation: Int { state.withLock { $0.generation } }

    /// Compiles the directory and, if it has no problem, makes it current.
    /// On failure the current set stays and the diagnostics say why.
    @discardableResult
    public func reload(from directory: String) -> Result<RuleSet, RuleSetError> {
        let result: Result<RuleSet, RuleSetError>
        do {
            result = .success(try RuleSet.load(directory: directory))
        } catch {
            result = .failure(error)
        }
        if case .success(let rules) = result { replace(with: rules) }
        return result
    }

    /// Makes an already compiled set current.
    public func replace(with rules: RuleSet) {
        state.withLock { $0 = (rules, $0.generation + 1) }
    }
}
