/// A traced command held for a push: its trace context (the span that
/// wrote it) and when the coalescer took it.
public struct CommandTrace: Sendable, Hashable {
    public var context: TraceContext
    /// The command's offset on `commands`.
    public var offset: Int64
    /// When the coalescer took the command: the start of its time in the
    /// coalescing window.
    public var heldSince: UnixTime

    public init(context: TraceContext, offset: Int64, heldSince: UnixTime) {
        self.context = context
        self.offset = offset
        self.heldSince = heldSince
    }

    /// The most traced commands one push keeps: the newest. A burst of a
    /// thousand traced commands into one push links to the last 64.
    public static let limitPerPush = 64

    /// `traces` with `more` added, the newest ``limitPerPush`` kept.
    static func appending(_ more: [CommandTrace], to traces: [CommandTrace]) -> [CommandTrace] {
        let all = traces + more
        return all.count > limitPerPush ? Array(all.suffix(limitPerPush)) : all
    }
}

/// What the services around a partition's machine need to trace one
/// completed push: the push, the traced commands it merged, when it was
/// flushed and how many tokens it reached. Reported only for pushes that
/// merged a traced command.
public struct PushTrace: Sendable, Hashable {
    public var activityID: ActivityID
    public var version: UInt64
    public var event: ActivityEvent
    public var commands: Int
    public var tokens: Int
    public var traces: [CommandTrace]
    public var flushedAt: UnixTime

    public init(
        activityID: ActivityID, version: UInt64, event: ActivityEvent, commands: Int, tokens: Int, traces: [CommandTrace],
        flushedAt: UnixTime
    ) {
        self.activityID = activityID
        self.version = version
        self.event = event
        self.commands = commands
        self.tokens = tokens
        self.traces = traces
        self.flushedAt = flushedAt
    }

    /// The context of the push's span: in the trace of the newest traced
    /// command, with a span id derived from that trace, the activity and
    /// the version, so the APNs requests of the push (``LiveActivityPush/traceContext``)
    /// name it as their parent before it is recorded.
    public var context: TraceContext? {
        traces.last.flatMap { Self.pushContext(parent: $0.context, activityID: activityID, version: version) }
    }

    /// The push span's context under the traced command `parent`.
    static func pushContext(parent: TraceContext, activityID: ActivityID, version: UInt64) -> TraceContext? {
        let seed = parent.traceIDLow ^ FNV1a.hash(activityID.rawValue) ^ SplitMix64.mix(version)
        let spanID = SplitMix64.mix(seed ^ parent.spanID)
        return parent.withSpanID(spanID == 0 ? 1 : spanID)
    }
}

extension Coalescer.Flush {
    /// Sets the traced commands the push merged, and the push's span
    /// context derived from them. The payload stays: the context is not
    /// part of it.
    mutating func trace(_ traces: [CommandTrace]) {
        var push = self.push
        push.traceContext = traces.last.flatMap {
            PushTrace.pushContext(parent: $0.context, activityID: push.activityID, version: push.version)
        }
        self = Coalescer.Flush(push: push, snapshot: snapshot, offsets: offsets, payload: payload, traces: traces, flushedAt: flushedAt)
    }
}
