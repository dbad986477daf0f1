"""What a visitor sees: screenshots of a site's pages in a real browser, and the diff that tells a visual break
from what moves by itself."""
