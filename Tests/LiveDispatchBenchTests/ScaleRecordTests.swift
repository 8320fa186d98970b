import LiveDispatchBench
import Testing

/// What `livedispatch-bench scale` computes from its record, called directly.
@Suite("bench scale: the record and the partition owners")
struct BenchScaleRecordTests {
    private func near(_ value: Double, _ expected: Double) -> Bool { abs(value - expected) < 1e-9 }

    @Test func theLongestGapEndsWithinTheWindowOrRunsToItsEnd() {
        let pushes = [1.0, 1.1, 5.0, 5.1, 9.9, 12.0]
        // 1.1 → 5.0 starts before the window and ends in it; 5.1 → 9.9 lies in it.
        #expect(near(ScaleRecord.longestGap(pushes, endingWithin: 4...10), 4.8))
        // A stretch from before the window counts whole; one that ends after it counts to the window's end.
        #expect(near(ScaleRecord.longestGap([1.0, 9.0, 20.0], endingWithin: 5...10), 8))
        #expect(near(ScaleRecord.longestGap([1.0, 2.0, 20.0], endingWithin: 5...10), 8))
        // No push by the window's end: the whole window.
        #expect(near(ScaleRecord.longestGap([], endingWithin: 5...10), 5))
        #expect(near(ScaleRecord.longestGap([11.0], endingWithin: 5...10), 5))
    }

    @Test func percentilesAreNearestRank() {
        let values = (1...100).map(Double.init)
        #expect(ScaleRecord.percentile(0.99, of: values) == 99)
        #expect(ScaleRecord.percentile(1, of: values) == 100)
        #expect(ScaleRecord.percentile(0.5, of: [4, 1, 3, 2]) == 2)
        #expect(ScaleRecord.percentile(0.99, of: [7]) == 7)
        #expect(ScaleRecord.percentile(0.99, of: []) == nil)
    }

    private func push(_ token: String, score: Int64, at time: Double) -> RecordedPushLine? {
        RecordedPushLine(Array(#"{"token":"\#(token)","received_at":\#(time),"payload":{"aps":{"content-state":{"teamOneScore":\#(score)}}}}"#.utf8)[...])
    }

    @Test func pushesAreAuditedPerTokenAndTimedPerEvent() throws {
        var record = ScaleRecord(activities: 2, tokens: 4, partitions: 3)
        // Tokens 0 and 2 are on activity 0.
        #expect(record.published(0, at: 10) == 1)
        #expect(record.published(0, at: 11) == 2)
        record.received(try #require(push(record.token(0), score: 2, at: 11.5)))
        record.received(try #require(push(record.token(0), score: 1, at: 12)))
        record.received(try #require(push(record.token(0), score: 2, at: 12.5)))
        record.received(try #require(push(String(repeating: "ee", count: 32), score: 2, at: 13)))
        #expect(record.pushes == 4)
        #expect(record.olderAfterNewer == 1)
        #expect(record.duplicates == 1)
        #expect(record.unknown == 1)
        // Both events reached a device with the first push of score 2.
        let partition = record.partitionOf[0]
        let latencies = record.latencies(published: 9...12, partitions: [partition])
        #expect(latencies.seconds.sorted() == [0.5, 1.5])
        #expect(latencies.unpushed == 0)
        #expect(record.latencies(published: 9...12, partitions: Set(0..<3).subtracting([partition])).seconds.isEmpty)
        // Token 2 has not received the final score yet.
        #expect(record.lostActivities == 1)
        record.received(try #require(push(record.token(2), score: 2, at: 14)))
        #expect(record.lostActivities == 0)
        #expect(near(record.longestGap(partition: partition, endingWithin: 11...14), 1.5))
        // The same pushes, seen from the partition of activity 0's events.
        #expect(near(record.longestGap(eventPartition: record.eventPartitionOf[0], endingWithin: 11...14), 1.5))
        #expect(record.latencies(published: 9...12) { $0 == 0 }.seconds.sorted() == [0.5, 1.5])
    }

    private func status(_ phase: String, _ partitions: [Int], routing: [Int] = []) throws -> WorkerStatus {
        try #require(WorkerStatus(json: #"{"phase":"\#(phase)","partitions":\#(partitions),"in_progress":0,"paused":false,"routing":{"sports.scores":\#(routing),"other":[0]},"handing_over":{},"ready":true}"#))
    }

    @Test func eachEventPartitionHasOneRouterOnceEveryPartitionIsRouted() throws {
        let split = ["a": try status("ready", [0, 1], routing: [1, 2]), "b": try status("ready", [2, 3], routing: [0, 3])]
        #expect(WorkerStatus.routers(split, workers: 2, topic: "sports.scores", partitions: 4) == [0: "b", 1: "a", 2: "a", 3: "b"])
        // A partition routed twice, one not routed, a worker missing, a topic nobody routes.
        #expect(WorkerStatus.routers(["a": try status("ready", [0], routing: [0, 1]), "b": try status("ready", [1], routing: [1])], workers: 2, topic: "sports.scores", partitions: 2) == nil)
        #expect(WorkerStatus.routers(["a": try status("ready", [0], routing: [0]), "b": try status("ready", [1])], workers: 2, topic: "sports.scores", partitions: 2) == nil)
        #expect(WorkerStatus.routers(split, workers: 3, topic: "sports.scores", partitions: 4) == nil)
        #expect(WorkerStatus.routers(split, workers: 2, topic: "absent", partitions: 4) == nil)
    }

    @Test func partitionsAreOwnedOnceEveryWorkerOwnsItsShareAndNoneRestores() throws {
        let split = ["a": try status("ready", [0, 1]), "b": try status("joining", [2, 3])]
        #expect(WorkerStatus.owners(split, workers: 2, partitions: 4) == [0: "a", 1: "a", 2: "b", 3: "b"])
        // Still one worker short, a partition twice, one missing, one restoring, one owning nothing.
        #expect(WorkerStatus.owners(split, workers: 3, partitions: 4) == nil)
        #expect(WorkerStatus.owners(["a": try status("ready", [0, 1, 2]), "b": try status("ready", [2, 3])], workers: 2, partitions: 4) == nil)
        #expect(WorkerStatus.owners(["a": try status("ready", [0, 1]), "b": try status("ready", [2])], workers: 2, partitions: 4) == nil)
        #expect(WorkerStatus.owners(["a": try status("ready", [0, 1]), "b": try status("restoring", [2, 3])], workers: 2, partitions: 4) == nil)
        #expect(WorkerStatus.owners(["a": try status("ready", [0, 1, 2, 3]), "b": try status("joining", [])], workers: 2, partitions: 4) == nil)
        // A partition still lingering on its old owner, or restoring on the new one; shares the assignor has not evened out yet.
        let lingering = try #require(WorkerStatus(json: #"{"phase":"ready","partitions":[0,1],"lingering":[1],"in_progress":0,"paused":false,"ready":true}"#))
        #expect(WorkerStatus.owners(["a": lingering, "b": try status("ready", [2, 3])], workers: 2, partitions: 4) == nil)
        let restoring = try #require(WorkerStatus(json: #"{"phase":"ready","partitions":[2,3],"restoring":[3],"in_progress":0,"paused":false,"ready":true}"#))
        #expect(WorkerStatus.owners(["a": try status("ready", [0, 1]), "b": restoring], workers: 2, partitions: 4) == nil)
        #expect(WorkerStatus.owners(["a": try status("ready", [0, 1, 2]), "b": try status("ready", [3])], workers: 2, partitions: 4) == nil)
        #expect(WorkerStatus.owners(["a": try status("ready", [0, 1]), "b": try status("ready", [2])], workers: 2, partitions: 3) == [0: "a", 1: "a", 2: "b"])
        // More workers than partitions: the others stand by.
        #expect(WorkerStatus.owners(["a": try status("ready", [0]), "b": try status("standby", [])], workers: 2, partitions: 1) == [0: "a"])
    }
}

@Suite("bench scale: the machine's CPU")
struct MachineCPUTests {
    @Test func busyTimeIsEverythingButIdleAndIOWait() throws {
        let earlier = try #require(MachineCPU(procStat: "cpu  100 10 50 800 40 0 0 0 0 0\ncpu0 50 5 25 400 20 0 0 0 0 0\n"))
        #expect(earlier.busy == 160 && earlier.total == 1000)
        let later = try #require(MachineCPU(procStat: "cpu  250 10 100 900 40 0 0 0 0 0\n"))
        #expect(later.busyShare(since: earlier) == 200.0 / 300.0)
        #expect(earlier.busyShare(since: later) == nil)
        #expect(earlier.busyShare(since: earlier) == nil)
        // Not the machine's line, too few numbers, not numbers.
        #expect(MachineCPU(procStat: "cpu0 1 2 3 4\n") == nil)
        #expect(MachineCPU(procStat: "cpu  1 2 3\n") == nil)
        #expect(MachineCPU(procStat: "cpu  1 2 x 4\n") == nil)
        #expect(MachineCPU(procStat: "") == nil)
        #expect(MachineCPU(procStat: "cpu  18446744073709551615 1 0 0\n") == nil)
    }
}
