/// The dispatcher as its router's downstream (``CommandsDownstream``):
/// its ``backlog`` counts in the router's back-pressure, it learns of the
/// router's assignments and where each command the router wrote landed.
extension Dispatcher: CommandsDownstream {}
