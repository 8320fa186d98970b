import Foundation
import LiveDispatchCore

/// Measures how many events per second one thread evaluates with the
/// shipped sports and delivery rules: JSON parsing of the event included.
public struct RuleBenchmark: Sendable {
    /// One sample kind's figures.
    public struct Measurement: Sendable {
        public var name: String
        public var events: Int
        public var commands: Int
        /// Wall-clock seconds: includes time the thread waited for a core.
        public var seconds: Double
        /// CPU seconds of the evaluating thread: the per-core figure.
        public var cpuSeconds: Double
        public var eventsPerSecond: Double { Double(events) / seconds }
        public var eventsPerCPUSecond: Double { Double(events) / cpuSeconds }
    }

    /// Sample events for the shipped rules: (topic, JSON value) pairs.
    public static func sampleEvents() -> [(name: String, topic: String, values: [[UInt8]])] {
        var goals: [[UInt8]] = []
        var periods: [[UInt8]] = []
        var deliveries: [[UInt8]] = []
        for index in 0..<64 {
            goals.append(Array(#"{"type":"goal","match_id":"superb-owl-\#(index)","minute":\#(index % 90),"scoring_team":"Owls","scorer":"Ada Lovelace","score":{"home":\#(index % 5),"away":\#(index % 3)}}"#.utf8))
            periods.append(Array(#"{"type":"period","match_id":"superb-owl-\#(index)","period":"second_half","minute":46}"#.utf8))
            deliveries.append(Array(#"{"order_id":"A-\#(1000 + index)","status":"on_the_way","eta":"2026-02-08T19:\#(10 + index % 40):00Z","driver":{"name":"Zoë"},"restaurant":"Owl Pizza"}"#.utf8))
        }
        return [("sports goal", "sports.scores", goals), ("sports period", "sports.scores", periods), ("delivery progress", "delivery.orders", deliveries)]
    }

    /// Evaluates `events` events of each sample kind on the calling thread.
    /// `cpuSeconds` reads the calling thread's CPU time, so that the figure
    /// per core holds on a machine shared with other work.
    public static func run(rules: RuleSet, events: Int, cpuSeconds: () -> Double) -> [Measurement] {
        let now = UnixTime(seconds: 1_770_577_200)
        var results: [Measurement] = []
        for sample in sampleEvents() {
            var commands = 0
            let clock = ContinuousClock()
            let start = clock.now
            let cpuStart = cpuSeconds()
            for index in 0..<events {
                let record = EventRecord(topic: sample.topic, partition: 0, offset: Int64(index), key: nil, timestamp: now)
                for outcome in rules.evaluate(record, value: sample.values[index & 63], now: now) {
                    if case .command = outcome { commands += 1 }
                }
            }
            let elapsed = clock.now - start
            let cpu = cpuSeconds() - cpuStart
            let seconds = elapsed.seconds
            results.append(Measurement(name: sample.name, events: events, commands: commands, seconds: max(seconds, 1e-9), cpuSeconds: max(cpu, 1e-9)))
        }
        return results
    }
}
