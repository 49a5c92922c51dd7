"""Local fakes of outside services, for tests: real servers speaking their wire formats."""
