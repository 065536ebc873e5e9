"""The face: argv -> one plain function per verb -> exit code."""
