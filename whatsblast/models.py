"""The site has no tables of its own.

The module exists so Django sends this app ``post_migrate`` (it skips apps without a models
module): ``whatsblast.apps`` keeps the roles current on it.
"""
