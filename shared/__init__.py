"""What both servers share and nothing else: the wire contract (targets, schemas, wire
encoding, settings, tokens), feature engineering, and the model code (backends, tree walk,
bundles, the served-bundle slot). The web layer both servers use is the `shared.web`
subpackage; no other module here imports a web framework or either server.

Import the module you need (`from shared.targets import Target`): this package imports
nothing itself, so a small module stays cheap to load.
"""
