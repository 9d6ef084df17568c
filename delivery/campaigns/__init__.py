"""Running a campaign over its messages: launch, lifecycle, canary, retries and progress."""
