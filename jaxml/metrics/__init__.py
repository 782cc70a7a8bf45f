"""Research metrics as pure array functions."""
