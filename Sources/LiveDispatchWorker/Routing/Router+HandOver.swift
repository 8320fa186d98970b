import Kafka
import LiveDispatchCore
import ServiceLifecycle
import Synchronization

/// The hand-over reader: routes, without committing, the partitions the
/// stage's machine hands over, and ends each hand-over when the group's
/// committed offsets show its new owner routes it.
extension Router {
    /// Routes what the hand-over reader reads, without committing.
    private func runLingering() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    do {
                        try await self.lingering.runUntilClosed()
                    } catch {
                        self.logger.warning("The hand-over reader stopped", metadata: ["error": "\(error)"])
                    }
                } onCancel: {
                    self.lingering.close()
                }
            }
            group.addTask {
                for await event in self.lingering.events {
                    guard case .record(let record) = event else { continue }
                    self.route(record, tracked: false)
                }
            }
        }
    }

    /// Runs the hand-over reader (a service of its own, ``HandOverService``,
    /// stopped after the dispatcher): on shutdown it waits until what the
    /// router handed over on leaving its group is routed by the new owners,
    /// quiet, or past its bound, then stops.
    func runHandOver() async {
        let stopping = Atomic(false)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.runLingering() }
                await self.watchHandOver { stopping.load(ordering: .acquiring) && self.stage.withLock(\.machine.isHandOverIdle) }
                self.input { stage, _ in stage.stop() }
                self.lingering.close()
            }
        } onGracefulShutdown: {
            stopping.store(true, ordering: .releasing)
            self.changes.signal()
        }
    }

    /// Ends each hand-over once the group's committed offset shows its new
    /// owner routes the partition; returns when `done`. The machine's own
    /// deadlines (its limit, the leaving bound, quiet spells) end the others
    /// through its timer. The committed offsets, another worker's progress,
    /// are read from Kafka every ``handOverCheck`` only while a hand-over is
    /// under way; otherwise, and between reads, it waits for ``changes`` (a
    /// hand-over starting or ending, the stage stopping).
    private func watchHandOver(until done: () -> Bool) async {
        var nextRead: ContinuousClock.Instant?
        while !Task.isCancelled {
            let seen = changes.generation
            if done() { return }
            let partitions = stage.withLock(\.machine.handingOver)
            guard !partitions.isEmpty else {
                nextRead = nil
                await changes.wait(after: seen, timeout: nil)
                continue
            }
            let due = nextRead ?? ContinuousClock.now + Self.handOverCheck
            nextRead = due
            let left = due - ContinuousClock.now
            guard left <= .zero else {
                await changes.wait(after: seen, timeout: left)
                continue
            }
            nextRead = ContinuousClock.now + Self.handOverCheck
            let committed = (try? await lingering.committedOffsets(for: partitions.map(Self.topicPartition), timeout: .seconds(2))) ?? [:]
            let offsets = Dictionary(committed.map { (Self.tracked($0.key), $0.value) }) { first, _ in first }
            input { stage, _ in stage.committed(offsets) }
        }
    }

    /// The hand-over reader as a service of its own, listed before the
    /// dispatcher so that it stops after it: a stopping worker's router
    /// leaves its group first and routes on what it owned while the
    /// dispatcher hands its partitions over.
    public struct HandOverService: Service {
        let router: Router

        public func run() async throws {
            await router.runHandOver()
        }
    }

    public var handOverService: HandOverService { HandOverService(router: self) }
}
