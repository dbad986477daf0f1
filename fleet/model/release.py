"""A release as the first-seen store keys it: (type, slug, offered version), whichever site offers it."""

UpdateKey = tuple[str, str, str]  # (type, slug, offered version)
