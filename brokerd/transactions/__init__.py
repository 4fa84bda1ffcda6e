"""The transaction coordinator: each transactional id's state, stored in `__transaction_state`."""
