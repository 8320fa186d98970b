import Kafka
import Testing

@Suite("Kafka ports: what fakes of a consumer and a producer are built from")
struct KafkaPortsTests {
    @Test func aHandFedEventSequenceGivesWhatWasYieldedInOrderThenEnds() async {
        let (events, continuation) = KafkaConsumerEvents.makeStream()
        let partition = TopicPartition(topic: "commands", partition: 0)
        let record = KafkaRecord(topic: "commands", partition: 0, offset: 7, key: Array("a".utf8), value: Array("{}".utf8))
        // Yielding never blocks, however much is yielded before anyone reads.
        for _ in 0..<100 { continuation.yield([.assigned([partition])]) }
        continuation.yield([.record(record), .revoked([partition], lost: false)])
        continuation.finish()
        var received: [KafkaConsumerEvent] = []
        for await event in events { received.append(event) }
        #expect(received.count == 102)
        #expect(received.suffix(2) == [.record(record), .revoked([partition], lost: false)])
    }

    @Test func aPromisedDeliveryReachesBothKindsOfWaiterOnce() async throws {
        let promise = KafkaDeliveryPromise(topic: "commands")
        let pending = promise.pending
        let report = KafkaDeliveryReport(topic: "commands", partition: 2, offset: 41)
        promise.resolve(.success(report))
        // A second result is ignored: a delivery resolves once.
        promise.resolve(.failure(KafkaError(code: .closed, message: "too late")))
        #expect(try await pending.wait() == report)
        let seen = await withCheckedContinuation { continuation in
            pending.whenComplete { continuation.resume(returning: $0) }
        }
        #expect(try seen.get() == report)
    }
}
