"""Dashboard widgets: tables of view-model rows and the status lines above them."""
