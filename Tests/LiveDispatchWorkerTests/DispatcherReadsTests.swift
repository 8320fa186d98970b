import Foundation
import Kafka
import LiveDispatchCore
@testable import LiveDispatchWorker
import TestSupport
import Testing

/// Reads answered by the dispatcher from its partitions' memory
/// (``ActivityReads``), over fake Kafka ports: only for partitions it owns
/// and has restored, and no longer once one is revoked.
@Suite("Dispatcher reads from memory", .serialized)
struct DispatcherReadsTests {
    static let tokens = WorkerConfiguration().topic(.tokens)

    @Test("the owner answers an activity, its tokens and the list; a partition it does not own, or no longer owns, is not answered")
    func ownerReads() async throws {
        let kafka = FakeKafka(partitionCount: 2)
        let worker = try DispatcherTests.start(kafka, linger: 0)
        worker.consumer.groupAssigns(DispatcherTests.commands([0, 1]))
        try await waitUntil("both partitions owned", timeout: .seconds(60)) {
            kafka.pump()
            return worker.dispatcher.status.owned == [0, 1] && worker.dispatcher.phase == .ready
        }
        let activity = try ActivityID("match-1")
        let partition = Murmur2Partitioner.partition(forKey: activity.rawValue, partitionCount: 2)
        let token = String(repeating: "a1", count: 32)
        let registration = #"{"activity_id": "match-1", "token": "\#(token)", "action": "register"}"#
        kafka.append(topic: Self.tokens, partition: partition, key: Array("match-1".utf8), value: Array(registration.utf8))
        for n in 1...2 { DispatcherTests.command(kafka, "match-1", n: n) }
        DispatcherTests.command(kafka, "cup-2", n: 1)
        try await waitUntil("the last state written", timeout: .seconds(60)) {
            kafka.pump()
            return DispatcherTests.lastN(kafka, "match-1") == 2 && DispatcherTests.lastN(kafka, "cup-2") == 1
        }

        #expect(Set(OwnedPartitionReads(worker.dispatcher).readablePartitions) == [0, 1])
        let read = try #require(OwnedPartitionReads(worker.dispatcher).activity(activity, partition: partition, tokensAfter: nil, limit: 10) ?? nil)
        #expect(read.state?.contentState["n"] == .integer(2))
        #expect(read.tokens.items.map(\.token.hex) == [token])
        #expect(OwnedPartitionReads(worker.dispatcher).activity(try ActivityID("match-9"), partition: partition, tokensAfter: nil, limit: 10) != nil,
            "the owner answers, holding nothing of it")
        #expect(OwnedPartitionReads(worker.dispatcher).activity(activity, partition: 1 - partition, tokensAfter: nil, limit: 10) != nil)

        let listing = OwnedPartitionReads(worker.dispatcher).activities(containing: nil, limit: 10, in: [0, 1])
        #expect(listing.entries.map(\.state.activityID.rawValue) == ["cup-2", "match-1"])
        #expect(listing.matched == 2 && listing.partitions == [0, 1])
        #expect(listing.entries.last?.tokens == 1)
        let first = OwnedPartitionReads(worker.dispatcher).activities(containing: "-", limit: 1, in: [0, 1])
        #expect(first.entries.map(\.state.activityID.rawValue) == ["cup-2"] && first.matched == 2)

        await worker.consumer.groupRevokes(DispatcherTests.commands([partition]))
        #expect(OwnedPartitionReads(worker.dispatcher).activity(activity, partition: partition, tokensAfter: nil, limit: 10) == nil, "not owned any more")
        #expect(OwnedPartitionReads(worker.dispatcher).readablePartitions == [1 - partition])
        #expect(OwnedPartitionReads(worker.dispatcher).activities(containing: nil, limit: 10, in: [0, 1]).partitions == [1 - partition])
        await worker.stop()
    }
}
