"""One call's processes: arguments checked, argv built, the child spawned, contained, confined and captured."""
