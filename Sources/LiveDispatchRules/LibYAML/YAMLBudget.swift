internal import CYaml

/// Limits on what a YAML text may make a loader build, checked on libyaml's
/// event stream before any tree is composed. Aliases are expanded by the
/// composer (Yams shares the node, but every walk over the tree visits each
/// use), so nine levels of ten aliases to the level below make 10⁹ nodes
/// from a few hundred bytes; deep nesting makes the composer recurse.
public struct YAMLBudget: Sendable, Hashable {
    /// Most alias uses (`*name`) in one text.
    public var maxAliases: Int
    /// Most nodes once every alias is expanded.
    public var maxNodes: Int
    /// Deepest nesting of mappings and lists.
    public var maxDepth: Int

    /// The budget of rule and configuration files: far above any real file.
    public static let files = YAMLBudget(maxAliases: 1_000, maxNodes: 200_000, maxDepth: 64)

    public init(maxAliases: Int, maxNodes: Int, maxDepth: Int) {
        self.maxAliases = maxAliases
        self.maxNodes = maxNodes
        self.maxDepth = maxDepth
    }

    /// Where a text goes over the budget, and how.
    public struct Exceeded: Error, Sendable, Hashable {
        /// 1-based line and column of the node that went over.
        public var line: Int
        public var column: Int
        public var message: String
    }

    /// Throws at the first node that goes over the budget. A text libyaml
    /// cannot parse passes: the composer reports that error with its own
    /// position.
    public func check(_ text: String) throws(Exceeded) {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else { return }
        defer { yaml_parser_delete(&parser) }
        var bytes = Array(text.utf8)
        try bytes.withUnsafeMutableBufferPointer { (buffer: inout UnsafeMutableBufferPointer<UInt8>) throws(Exceeded) in
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            var tally = Tally(budget: self)
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) == 1 else { return }
                defer { yaml_event_delete(&event) }
                let mark = event.start_mark
                let line = Int(clamping: mark.line) + 1
                let column = Int(clamping: mark.column) + 1
                let problem: String?
                switch event.type {
                case YAML_STREAM_END_EVENT:
                    return
                case YAML_SCALAR_EVENT:
                    problem = tally.node(size: 1, anchor: Self.name(event.data.scalar.anchor))
                case YAML_ALIAS_EVENT:
                    problem = tally.alias(Self.name(event.data.alias.anchor))
                case YAML_SEQUENCE_START_EVENT:
                    problem = tally.open(anchor: Self.name(event.data.sequence_start.anchor))
                case YAML_MAPPING_START_EVENT:
                    problem = tally.open(anchor: Self.name(event.data.mapping_start.anchor))
                case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                    problem = tally.close()
                default:
                    problem = nil
                }
                if let problem { throw Exceeded(line: line, column: column, message: problem) }
            }
        }
    }

    private static func name(_ anchor: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        guard let anchor else { return nil }
        return String(cString: UnsafeRawPointer(anchor).assumingMemoryBound(to: CChar.self))
    }
}

/// The running count of a ``YAMLBudget`` check: the expanded size of every
/// anchored node, and of the collections still open.
private struct Tally {
    let budget: YAMLBudget
    var anchors: [String: Int] = [:]
    /// Open collections: their anchor and expanded size so far.
    var open: [(anchor: String?, size: Int)] = []
    var aliases = 0
    var nodes = 0

    init(budget: YAMLBudget) { self.budget = budget }

    var tooManyNodes: String { "the YAML expands to more than \(budget.maxNodes) nodes (aliases included)" }

    mutating func node(size: Int, anchor: String?) -> String? {
        nodes = nodes.addingReportingOverflow(size).overflow ? Int.max : nodes + size
        if nodes > budget.maxNodes { return tooManyNodes }
        if let anchor { anchors[anchor] = size }
        if !open.isEmpty { open[open.count - 1].size += size }
        return nil
    }

    mutating func alias(_ anchor: String?) -> String? {
        aliases += 1
        if aliases > budget.maxAliases {
            return "the YAML has more than \(budget.maxAliases) aliases"
        }
        return node(size: anchor.flatMap { anchors[$0] } ?? 1, anchor: nil)
    }

    mutating func open(anchor: String?) -> String? {
        if open.count >= budget.maxDepth {
            return "the YAML is nested deeper than \(budget.maxDepth) levels"
        }
        nodes += 1
        if nodes > budget.maxNodes { return tooManyNodes }
        open.append((anchor, 1))
        return nil
    }

    mutating func close() -> String? {
        guard let finished = open.popLast() else { return nil }
        if let anchor = finished.anchor { anchors[anchor] = finished.size }
        if !open.isEmpty { open[open.count - 1].size += finished.size }
        return nil
    }
}
