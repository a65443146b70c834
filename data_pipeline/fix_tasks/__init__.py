"""pipeline=fix-tasks: "fix the bug" rows made by injecting bugs into code whose tests catch them."""
