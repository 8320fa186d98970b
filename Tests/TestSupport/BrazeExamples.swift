/// The request bodies of Braze's REST reference for its Live Activity
/// endpoints, as Braze's pages print them (the `--data-raw` of each
/// "Example request"), for the tests of the Braze-compatible routes.
public enum BrazeExamples {
    /// `POST /messages/live_activity/update`, "Example request".
    public static let update = """
        {
            "app_id": "{YOUR-APP-API-IDENTIFIER}",
            "activity_id": "live-activity-1",
            "content_state": {
                "teamOneScore": 2,
                "teamTwoScore": 4
            },
            "end_activity": false,
            "dismissal_date": "2023-02-28T00:00:00+0000",
            "stale_date": "2023-02-27T16:55:49+0000",
            "notification": {
                "alert": {
                    "body": "It's halftime! Let's look at the scores",
                    "title": "Halftime"
                }
            }
        }
        """
    /// The `app_id` placeholder of ``update``.
    public static let updateAppID = "{YOUR-APP-API-IDENTIFIER}"

    /// `POST /messages/live_activity/start`, "Example request" (targeting
    /// users by external user id and by user alias).
    public static let start = """
        {
          "app_id": "{YOUR_APP_API_IDENTIFIER}",
          "activity_id": "football-chiefs-bills-2024-01-21",
          "content_state": {
            "teamOneScore": 0,
            "teamTwoScore": 0
          },
          "activity_attributes_type": "FootballActivity",
          "activity_attributes": {
            "team1Name": "Chiefs",
            "team2Name": "Bills"
          },
          "stale_date": "2024-01-22T16:55:49+0000",
          "notification": {
            "alert": {
              "body": "The game is starting! Tune in soon!",
              "title": "Chiefs v. Bills"
            }
          },
          "external_user_ids": ["user-id1", "user-id2"],
          "user_aliases": [
            {
              "alias_name": "user-name",
              "alias_label": "user-label"
            }
          ]
        }
        """
    /// The `app_id` placeholder of ``start``.
    public static let startAppID = "{YOUR_APP_API_IDENTIFIER}"
    /// The audience keys ``start`` addresses: each external user id, and
    /// `alias:<alias_label>:<alias_name>` for the alias.
    public static let startAudiences = ["user-id1", "user-id2", "alias:user-label:user-name"]
}
