"""groups package."""
