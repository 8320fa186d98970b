import Kafka
import LiveDispatchCore

extension PartitionRunner {
    /// The partitions of one restore: the changelogs read into the machine,
    /// and the inputs whose ends hold its pushes back.
    struct RestoreReads: Sendable {
        let states: TopicPartition
        let tokenStore: TopicPartition
        let commands: TopicPartition
        let registrations: TopicPartition
        /// Where the follower reads `registrations` from.
        let tokensFrom: Int64
    }

    /// Reads the partition's `state` and `token-store` changelogs into its
    /// machine (registrations a batch under one lock take, snapshots once
    /// the changelog is read) and the ends of its `commands` and `tokens`
    /// now, all on one client; returns the records read. The previous
    /// owner may have pushed any state of the commands up to the
    /// partition's end now, to the tokens registered up to the end of
    /// `tokens`: pushes are held until both are read.
    func readChangelogs(_ reads: RestoreReads, from reader: any PartitionReaderPort) async throws -> (states: Int, tokens: Int) {
        var ends: [TopicPartition: Int64] = [:]
        var read = (states: 0, tokens: 0)
        // Only each activity's last snapshot is read and decoded: a
        // changelog's head is not compacted yet (Tansu never compacts), and
        // an activity pushed a thousand times has a thousand snapshots there.
        let partitions: [TopicPartition: PartitionRead] = [
            reads.states: .latestPerKey, reads.tokenStore: .records, reads.commands: .endOffset, reads.registrations: .endOffset,
        ]
        try await reader.read(partitions, timeout: .seconds(30)) { event in
            switch event {
            case .records(let partition, let records) where partition == reads.states:
                restoring { machine in
                    for record in records { machine.restoreState(key: String(decoding: record.key ?? [], as: UTF8.self), value: record.value) }
                }
                read.states += records.count
            case .records(_, let records):
                restoring { machine in
                    for record in records { machine.restoreToken(key: record.key ?? [], value: record.value) }
                }
                read.tokens += records.count
            case .caughtUp(let partition, let end):
                ends[partition] = end
                guard partition == reads.commands || partition == reads.registrations,
                      let commandsEnd = ends[reads.commands], let registrationsEnd = ends[reads.registrations]
                else { return }
                let unread = registrationsEnd > reads.tokensFrom ? registrationsEnd : nil
                restoring { $0.holdPushes(untilCommandOffset: commandsEnd, tokenOffset: unread) }
            }
        }
        return read
    }
}
