"""The Textual dashboard (``mqadmin dashboard``): screens and widgets over one Admin poller."""
