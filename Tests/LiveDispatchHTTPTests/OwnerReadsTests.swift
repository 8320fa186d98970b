import Foundation
import Kafka
@testable import LiveDispatchHTTP
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchWorker
import Synchronization
import Testing

/// The read routes answered from the owner's memory when this worker owns
/// the partition, and from Kafka (said so) when it does not.
@Suite("Read API: answered by the partition's owner")
struct OwnerReadsTests {
    static let partitions = 6
    static let now = UnixTime(seconds: 1_764_000_000)

    /// An owner holding `match-1` and the audience `followers` in whatever
    /// partitions they go to, when those are readable.
    final class FakeOwner: ActivityReads {
        let readable: Mutex<[Int32]>
        let asked = Mutex<[String]>([])

        init(readable: [Int32]) { self.readable = Mutex(readable) }

        var readablePartitions: [Int32] { readable.withLock { $0 } }

        func activity(_ activity: ActivityID, partition: Int32, tokensAfter cursor: String?, limit: Int) -> PartitionDispatcher.ActivityRead?? {
            asked.withLock { $0.append("activity \(activity.rawValue) in \(partition)") }
            guard readablePartitions.contains(partition) else { return nil }
            guard activity.rawValue == "match-1" else { return .some(nil) }
            let state = ActivityState(activityID: activity, contentState: ["score": .integer(2)], version: 3, createdAt: OwnerReadsTests.now)
            let token = TokenRegistration(activityID: activity, token: try! DeviceToken(hex: "a1"), registeredAt: OwnerReadsTests.now)
            return .some(.init(state: state, pushes: [], tokens: .init(count: 4, items: [token], next: "a1")))
        }

        func audience(_ audience: AudienceKey, partition: Int32, after cursor: String?, limit: Int)
            -> PartitionDispatcher.TokenPage<PartitionDispatcher.AudienceToken>?
        {
            guard readablePartitions.contains(partition) else { return nil }
            let registration = PushToStartRegistration(audience: audience, attributesType: "MatchAttributes", token: try! DeviceToken(hex: "e5"))
            return .init(count: 1, items: [.init(registration: registration, ledger: .init())], next: nil)
        }

        func activities(containing text: String?, limit: Int, in partitions: [Int32]) -> ActivityListing {
            let readable = partitions.filter(readablePartitions.contains)
            let state = ActivityState(activityID: try! ActivityID("match-1"), version: 3, createdAt: OwnerReadsTests.now)
            return ActivityListing(matched: 1, entries: [.init(state: state, lastPush: nil, tokens: 4)], partitions: readable)
        }
    }

    /// Topics read from Kafka.
    final class KafkaReads: Sendable {
        let topics = Mutex<[String]>([])
    }

    func api(_ owner: FakeOwner, kafka: KafkaReads) throws -> WorkerAPI {
        let rules = try RuleSet.compile(files: [])
        return WorkerAPI(
            topics: .init(commands: "c", tokens: "t", state: "s", tokenStore: "ts", deadLetters: "d", channels: "ch"),
            produce: { _, _, _ in }, makeID: { "id" }, rules: { rules },
            readTopic: { topic, _, _ in kafka.topics.withLock { $0.append(topic) } },
            owner: OwnerReads(reads: owner, partitionCount: FixedPartitionCount(count: Self.partitions)))
    }

    static func partition(_ key: String) -> Int32 { Murmur2Partitioner.partition(forKey: key, partitionCount: partitions) }

    @Test("the owner answers an activity from memory and Kafka is not read")
    func ownedActivity() async throws {
        let owner = FakeOwner(readable: [Self.partition("match-1")])
        let kafka = KafkaReads()
        let answer = try await api(owner, kafka: kafka).getActivity(.init(path: .init(activityId: "match-1"), query: .init()))
        guard case .ok(let ok) = answer, case .json(let view) = ok.body else {
            Issue.record("expected 200, got \(answer)")
            return
        }
        #expect(view.source == .owner)
        #expect(view.version == 3)
        #expect(view.tokens.count == 4 && view.tokens.items.map(\.token) == ["a1"] && view.tokens.nextCursor == "a1")
        #expect(view.deadLetters == nil)
        #expect(kafka.topics.withLock { $0 }.isEmpty)
    }

    @Test("the owner answers 404 for an activity it holds nothing of, without reading Kafka")
    func ownedUnknown() async throws {
        let owner = FakeOwner(readable: [Self.partition("match-9")])
        let kafka = KafkaReads()
        let answer = try await api(owner, kafka: kafka).getActivity(.init(path: .init(activityId: "match-9"), query: .init()))
        guard case .notFound = answer else {
            Issue.record("expected 404, got \(answer)")
            return
        }
        #expect(kafka.topics.withLock { $0 }.isEmpty)
    }

    @Test("an activity of a partition this worker does not own is read from Kafka, and the answer says so")
    func notOwned() async throws {
        let others = (0..<Int32(Self.partitions)).filter { $0 != Self.partition("match-1") }
        let owner = FakeOwner(readable: others)
        let kafka = KafkaReads()
        let answer = try await api(owner, kafka: kafka).listActivityTokens(.init(path: .init(activityId: "match-1"), query: .init()))
        guard case .ok(let ok) = answer, case .json(let page) = ok.body else {
            Issue.record("expected 200, got \(answer)")
            return
        }
        #expect(page.source == .kafka)
        #expect(kafka.topics.withLock { $0 } == ["s", "ts"])
        #expect(owner.asked.withLock { $0 } == ["activity match-1 in \(Self.partition("match-1"))"])
    }

    @Test("a list comes from memory only when every partition is readable here")
    func list() async throws {
        let all = (0..<Int32(Self.partitions)).map { $0 }
        let owner = FakeOwner(readable: all)
        let kafka = KafkaReads()
        let api = try api(owner, kafka: kafka)
        guard case .ok(let ok) = try await api.listActivities(.init(query: .init())), case .json(let list) = ok.body else {
            Issue.record("expected 200")
            return
        }
        #expect(list.source == .owner && list.activities.map(\.activityId) == ["match-1"] && list.activities.first?.tokens == 4)
        #expect(kafka.topics.withLock { $0 }.isEmpty)

        owner.readable.withLock { $0 = Array(all.dropFirst()) }
        guard case .ok(let partial) = try await api.listActivities(.init(query: .init())), case .json(let fromKafka) = partial.body else {
            Issue.record("expected 200")
            return
        }
        #expect(fromKafka.source == .kafka)
        #expect(kafka.topics.withLock { $0 } == ["s", "ts"])
    }

    @Test("the owner answers an audience from memory")
    func audience() async throws {
        let owner = FakeOwner(readable: [Self.partition("followers")])
        let kafka = KafkaReads()
        let answer = try await api(owner, kafka: kafka).getAudience(.init(path: .init(audience: "followers"), query: .init()))
        guard case .ok(let ok) = answer, case .json(let view) = ok.body else {
            Issue.record("expected 200, got \(answer)")
            return
        }
        #expect(view.source == .owner && view.items.map(\.token) == ["e5"])
        #expect(kafka.topics.withLock { $0 }.isEmpty)
    }
}
