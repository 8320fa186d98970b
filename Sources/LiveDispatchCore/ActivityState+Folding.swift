extension ActivityState {
    /// Folds what `command` says about the activity into this state: its
    /// content-state (replaced by a start or `replace_state`, merged
    /// otherwise), dates, relevance, attributes and app. The coalescer does
    /// this for every command it accepts; `rules diff` does it to show what
    /// the Lock Screen would have shown. Versions, offsets, remembered ids
    /// and `ended_at` are the caller's.
    public mutating func fold(_ command: ActivityCommand, now: UnixTime) {
        if command.event == .start || command.replaceState {
            contentState = command.contentState ?? .object([:])
        } else if let patch = command.contentState {
            contentState.applyMergePatch(patch)
        }
        if command.event == .end {
            // An end carries only what its own command sets: the stale date
            // and relevance of earlier updates do not apply to the final
            // state (nor to its push sent again after a restart), and a
            // dismissal date set by an update (where it means nothing) never
            // dismisses the activity.
            staleDate = command.staleDate
            relevanceScore = command.relevanceScore
            dismissalDate = command.dismissalDate
        } else {
            if let staleDate = command.staleDate {
                self.staleDate = staleDate
            } else if let carried = staleDate, carried <= now {
                // A stale date that has passed is not carried into a new
                // update: it would arrive already stale, expiring at once.
                staleDate = nil
            }
            if let relevanceScore = command.relevanceScore { self.relevanceScore = relevanceScore }
        }
        if let attributesType = command.attributesType { self.attributesType = attributesType }
        if let attributes = command.attributes { self.attributes = attributes }
        if app == nil { app = command.app }
    }
}
