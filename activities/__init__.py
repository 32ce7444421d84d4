"""The search activities: ripgrep-backed glob and grep for one workspace."""
