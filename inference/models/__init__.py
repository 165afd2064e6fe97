"""Model catalog (model_specs/*.json), option validation and the on-disk model store."""
