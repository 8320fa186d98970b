import Kafka

/// What the router needs of the stage that takes the commands it writes
/// (the worker's ``Dispatcher``): a fake of it drives the router in process.
protocol CommandsDownstream: Sendable {
    /// The commands written and not yet taken in, counted in the router's
    /// back-pressure: routing pauses while the worker is that far behind
    /// on dispatching.
    var backlog: Int { get }
    /// The router's group assigned it (even nothing): the worker is ready
    /// only once both of its groups have.
    func routerAssigned()
    /// Where a command the router wrote landed.
    func commandWritten(_ report: KafkaDeliveryReport)
}
