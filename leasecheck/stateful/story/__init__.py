"""The story that tells: timelines, pictures, saved programs, replay and minimizing."""
