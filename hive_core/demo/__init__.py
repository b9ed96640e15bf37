"""The demo: a scripted office (a manager and two engineers) and the scripted model APIs
the tests and the demo run the real CLIs against."""
