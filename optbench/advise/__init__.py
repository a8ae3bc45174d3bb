"""Advise: one word per technique on the user's model, the recipe, loading the user's model."""
