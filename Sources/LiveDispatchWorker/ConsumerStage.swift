import Kafka
import ServiceLifecycle

/// Work a stage's consumer events create (a send, a write, a timer), run as a child task.
typealias StageJob = @Sendable () async -> Void

/// The loop both stages (router and dispatcher) run. It runs the consumer,
/// reads its events in order on one task, runs `sideTasks` beside it, and
/// runs every job the events create as a child task. On graceful shutdown
/// `drain` runs first, then the consumer closes (its final commit and leave),
/// which ends the events; `afterClose` runs (the side tasks still running),
/// and then the jobs end.
struct ConsumerStage: Sendable {
    let consumer: any ConsumerPort
    let jobs: AsyncStream<StageJob>
    let jobSink: AsyncStream<StageJob>.Continuation

    init(consumer: any ConsumerPort) {
        self.consumer = consumer
        (jobs, jobSink) = AsyncStream.makeStream(of: StageJob.self, bufferingPolicy: .unbounded)
    }

    /// Events handled before the stage's task lets the pool's other jobs run.
    static let eventsBetweenYields = 256

    func schedule(_ job: @escaping StageJob) {
        jobSink.yield(job)
    }

    func run(
        handle: @escaping @Sendable (KafkaConsumerEvent) -> Void, sideTasks: [StageJob] = [],
        drain: @escaping @Sendable () async -> Void, afterClose: @escaping StageJob = {}
    ) async throws {
        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask {
                    try await withTaskCancellationHandler {
                        try await consumer.run()
                    } onCancel: {
                        consumer.close()
                    }
                }
                group.addTask {
                    var sinceYield = 0
                    for await event in consumer.events {
                        handle(event)
                        // Events taken as one batch would hold a thread of the
                        // shared pool until the batch ends: health checks,
                        // scrapes and restores get their turn in between.
                        sinceYield += 1
                        if sinceYield == Self.eventsBetweenYields {
                            sinceYield = 0
                            await Task.yield()
                        }
                    }
                    // The consumer closed (after the drain, or on its own): stop the jobs.
                    await afterClose()
                    jobSink.finish()
                }
                for task in sideTasks { group.addTask { await task() } }
                for await job in jobs { group.addTask { await job() } }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            jobSink.yield {
                await drain()
                consumer.close()
            }
        }
    }
}
