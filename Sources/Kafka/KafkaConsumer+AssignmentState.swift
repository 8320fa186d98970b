extension KafkaConsumer {
    /// The consumer's view of its assignment and of the partitions the
    /// application paused. Inputs come from the rebalance callback (poll
    /// thread) and from the application; each returns what to do to
    /// librdkafka. The owner keeps it under a lock and acts after releasing it.
    struct AssignmentState: Sendable {
        enum Phase: Sendable {
            case running
            case closing
            case closed
        }

        private(set) var assigned: Set<TopicPartition> = []
        private(set) var paused: Set<TopicPartition> = []
        private(set) var phase: Phase = .running

        enum AssignAction: Equatable, Sendable {
            /// Hand these partitions to librdkafka and announce them, in this order of the event stream.
            case assign([TopicPartition])
        }

        enum RevokeAction: Equatable, Sendable {
            /// Commit stored offsets first (unless the assignment was lost), then announce and unassign.
            case revoke([TopicPartition], commitFirst: Bool)
        }

        enum PauseAction: Equatable, Sendable {
            /// Call librdkafka for these partitions (possibly none).
            case apply([TopicPartition])
            /// Not while closing or closed.
            case rejectClosed
        }

        enum CloseAction: Equatable, Sendable {
            /// Start closing: final commit, leave the group.
            case close
            /// Already closing or closed.
            case none
        }

        /// Partitions were assigned (incrementally under cooperative rebalancing).
        /// Newly assigned partitions start unpaused.
        mutating func assigned(_ partitions: [TopicPartition]) -> AssignAction {
            let new = partitions.filter { !assigned.contains($0) }
            assigned.formUnion(new)
            for partition in new { paused.remove(partition) }
            return .assign(partitions.sorted())
        }

        /// Partitions were revoked; `lost` when the member was thrown out of the group.
        mutating func revoked(_ partitions: [TopicPartition], lost: Bool) -> RevokeAction {
            for partition in partitions {
                assigned.remove(partition)
                paused.remove(partition)
            }
            return .revoke(partitions.sorted(), commitFirst: !lost)
        }

        /// The application pauses partitions; only assigned, running ones are paused.
        mutating func pause(_ partitions: [TopicPartition]) -> PauseAction {
            switch phase {
            case .running:
                let toPause = Set(partitions).intersection(assigned).subtracting(paused)
                paused.formUnion(toPause)
                return .apply(toPause.sorted())
            case .closing, .closed:
                return .rejectClosed
            }
        }

        /// The application resumes partitions it paused.
        mutating func resume(_ partitions: [TopicPartition]) -> PauseAction {
            switch phase {
            case .running:
                let toResume = Set(partitions).intersection(paused)
                paused.subtract(toResume)
                return .apply(toResume.sorted())
            case .closing, .closed:
                return .rejectClosed
            }
        }

        /// Close was requested (graceful shutdown or ``KafkaConsumer/close()``).
        mutating func closeRequested() -> CloseAction {
            switch phase {
            case .running:
                phase = .closing
                return .close
            case .closing, .closed:
                return .none
            }
        }

        /// The poll loop finished closing the client.
        mutating func closed() {
            phase = .closed
            assigned = []
            paused = []
        }
    }
}
