import Foundation
import Kafka
import LiveDispatchCore

/// A taken partition's restore, once its previous owner let go: the
/// follower starts reading its co-partitions (if the machine still wants
/// them followed), the runner reads its `state` and `token-store`
/// changelogs to their end, and the ``DispatchStage`` machine is told it
/// is restored, which lets its records flow. A failed read is retried with
/// ``Backoff/partitionRestore`` until the runner closes or the stage stops.
struct ChangelogRestore {
    let dispatcher: Dispatcher
    let runner: PartitionRunner

    func run() async {
        let number = runner.number
        let configuration = dispatcher.configuration
        let started = ContinuousClock.now
        var attempt = 0
        // A stage shutting down cancels its jobs: a restore still under way stops.
        while !runner.isClosed, !Task.isCancelled {
            do {
                let registrations = TopicPartition(topic: configuration.topic(.tokens), partition: number)
                let offsets = try await dispatcher.follower.follow(number) { [runner] in
                    dispatcher.state.withLock { $0.runners[number] === runner && $0.machine.follow(number) }
                }
                let followed = ContinuousClock.now
                let reads = PartitionRunner.RestoreReads(
                    states: TopicPartition(topic: configuration.topic(.state), partition: number),
                    tokenStore: TopicPartition(topic: configuration.topic(.tokenStore), partition: number),
                    commands: dispatcher.commandsPartition(number), registrations: registrations, tokensFrom: offsets[registrations] ?? 0)
                let restored = try await runner.readChangelogs(reads, from: dispatcher.reader)
                let read = ContinuousClock.now
                guard let catchingUp = runner.finishRestore() else { return }
                dispatcher.pauses.withLock { _ in dispatcher.decide { machine, now in machine.restored(number, catchingUp: catchingUp, now: now) } }
                // The last restore done: the records it fetched are free.
                if dispatcher.reportPartitions() == 0 { MallocTuning.releaseFreeMemory() }
                dispatcher.logger.info("Partition restored", metadata: [
                    "kafka.partition": "\(number)", "restore.states": "\(restored.states)", "restore.tokens": "\(restored.tokens)",
                    "restore.seconds": "\(String(format: "%.3f", (ContinuousClock.now - started).seconds))",
                    "restore.install_seconds": "\(String(format: "%.3f", (ContinuousClock.now - read).seconds))",
                    "restore.follow_seconds": "\(String(format: "%.3f", (followed - started).seconds))",
                ])
                return
            } catch {
                attempt += 1
                dispatcher.logger.error(
                    "Restoring a partition failed; retrying",
                    metadata: ["kafka.partition": "\(number)", "kafka.error": "\(error)", "restore.attempt": "\(attempt)"])
                try? await Task.sleep(for: .seconds(Backoff.partitionRestore.ceiling(attempt: attempt)))
            }
        }
    }
}
