"""What the group and transaction coordinators share: internal topics, written and loaded
alike."""
