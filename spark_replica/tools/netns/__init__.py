"""Separate hosts on one machine: network namespaces joined by a bridge, and cuts between
them, so that network partitions can be made and healed for real (`replog up --netns`,
`replog net`, the partition tests)."""
