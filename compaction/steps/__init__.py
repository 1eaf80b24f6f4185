"""The steps that change a working view: choosing chunks, running passes, now or in the background."""
