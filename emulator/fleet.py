"""The deterministic fleet generator: the same `--sites N --seed S` always builds the same dashboard."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from emulator.records import Client, Cost, Heartbeat, Item, Monitor, Post, Site, SiteUser, Tag

PLUGINS = [
    ("akismet/akismet.php", "Akismet Anti-spam: Spam Protection", "5.7"),
    ("classic-editor/classic-editor.php", "Classic Editor", "1.6.7"),
    ("contact-form-7/wp-contact-form-7.php", "Contact Form 7", "6.1.3"),
    ("woocommerce/woocommerce.php", "WooCommerce", "10.3.5"),
    ("wordpress-seo/wp-seo.php", "Yoast SEO", "26.4"),
    ("elementor/elementor.php", "Elementor", "3.33.1"),
    ("jetpack/jetpack.php", "Jetpack", "15.2"),
    ("wordfence/wordfence.php", "Wordfence Security", "8.1.2"),
    ("updraftplus/updraftplus.php", "UpdraftPlus - Backup/Restore", "1.25.9"),
    ("really-simple-ssl/rlrsssl-really-simple-ssl.php", "Really Simple Security", "9.5.3"),
    ("wp-mail-smtp/wp_mail_smtp.php", "WP Mail SMTP", "4.7.0"),
    ("litespeed-cache/litespeed-cache.php", "LiteSpeed Cache", "7.6.2"),
    ("all-in-one-seo-pack/all_in_one_seo_pack.php", "All in One SEO", "4.9.0"),
    ("wpforms-lite/wpforms.php", "WPForms Lite", "1.9.8.4"),
    ("redirection/redirection.php", "Redirection", "5.5.2"),
    ("duplicate-post/duplicate-post.php", "Yoast Duplicate Post", "4.5"),
    ("advanced-custom-fields/acf.php", "Advanced Custom Fields", "6.6.2"),
    ("google-site-kit/google-site-kit.php", "Site Kit by Google", "1.166.0"),
    ("wp-super-cache/wp-cache.php", "WP Super Cache", "3.0.2"),
    ("w3-total-cache/w3-total-cache.php", "W3 Total Cache", "2.8.14"),
    ("mailchimp-for-wp/mailchimp-for-wp.php", "MC4WP: Mailchimp for WordPress", "4.10.8"),
    ("regenerate-thumbnails/regenerate-thumbnails.php", "Regenerate Thumbnails", "3.1.6"),
    ("wp-optimize/wp-optimize.php", "WP-Optimize", "4.3.0"),
    ("smush/wp-smush.php", "Smush", "3.22.1"),
    ("instagram-feed/instagram-feed.php", "Smash Balloon Social Photo Feed", "6.9.1"),
    ("tablepress/tablepress.php", "TablePress", "3.2.5"),
    ("sucuri-scanner/sucuri.php", "Sucuri Security", "2.3"),
    ("limit-login-attempts-reloaded/limit-login-attempts-reloaded.php", "Limit Login Attempts Reloaded", "2.26.24"),
    ("cookie-notice/cookie-notice.php", "Cookie Notice & Compliance", "2.5.8"),
    ("hello.php", "Hello Dolly", "1.7.2"),
    ("query-monitor/query-monitor.php", "Query Monitor", "3.20.0"),
    ("wp-file-manager/file_folder_manager.php", "WP File Manager", "8.0.2"),
    ("the-events-calendar/the-events-calendar.php", "The Events Calendar", "6.15.11"),
    ("polylang/polylang.php", "Polylang", "3.7.4"),
    ("safe-svg/safe-svg.php", "Safe SVG", "2.4.0"),
    ("header-footer-code-manager/99robots-header-footer-code-manager.php", "Header Footer Code Manager", "1.1.43"),
]
THEMES = [
    ("twentytwentyfive", "Twenty Twenty-Five", "1.3"),
    ("twentytwentyfour", "Twenty Twenty-Four", "1.3"),
    ("twentytwentythree", "Twenty Twenty-Three", "1.6"),
    ("astra", "Astra", "4.11.15"),
    ("generatepress", "GeneratePress", "3.6.0"),
    ("oceanwp", "OceanWP", "4.1.2"),
    ("kadence", "Kadence", "1.3.6"),
    ("hello-elementor", "Hello Elementor", "3.4.5"),
    ("neve", "Neve", "4.1.4"),
    ("blocksy", "Blocksy", "2.1.20"),
]
TRANSLATED = ["woocommerce", "wordpress-seo", "contact-form-7", "jetpack", "akismet"]
CORE_LATEST = "6.8.3"
CORE_VERSIONS = ["6.8.3", "6.8.3", "6.8.3", "6.8.2", "6.8.1", "6.7.4", "6.6.4"]
PHP_VERSIONS = ["7.4.33", "8.0.30", "8.1.33", "8.2.29", "8.2.29", "8.3.26", "8.4.14"]
CHILD_VERSIONS = ["6.1", "6.1", "6.1", "6.0.2", "5.4.0.1", "5.3"]
OLD_CHILD_VERSIONS = ["3.5.9", "3.9.1"]
TAG_NAMES = [
    ("Production", "#2ecc71"),
    ("Staging", "#f1c40f"),
    ("E-commerce", "#9b59b6"),
    ("VIP", "#e74c3c"),
    ("Agency", "#3498db"),
    ("Maintenance plan", "#1abc9c"),
]
WORDS = [
    "alpine",
    "harbor",
    "maple",
    "cobalt",
    "summit",
    "willow",
    "ember",
    "lumen",
    "orchid",
    "quartz",
    "riverside",
    "saffron",
    "tidal",
    "velvet",
    "zephyr",
    "granite",
    "juniper",
    "meadow",
    "nova",
    "pioneer",
]
KINDS = [
    "bakery",
    "studio",
    "dental",
    "law",
    "garden",
    "fitness",
    "travel",
    "books",
    "coffee",
    "design",
    "clinic",
    "motors",
    "events",
    "photo",
    "yoga",
    "school",
    "realty",
    "shop",
    "brewing",
    "labs",
]
TLDS = ["com", "net", "org", "io", "co.uk", "de", "nl", "fr"]
FIRST = ["Ada", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kira", "Liam"]
LAST = ["Archer", "Berg", "Costa", "Duarte", "Evans", "Fischer", "Garcia", "Hansen", "Ito", "Jansen"]


@dataclass
class GeneratedFleet:
    sites: list[Site]
    tags: list[Tag]
    clients: list[Client]
    costs: list[Cost]
    global_ignores: dict[str, dict[str, list[str]] | list[str]] = field(default_factory=dict)


def _bump(version: str, rng: random.Random) -> str:
    """A newer release: mostly patch, sometimes minor, rarely major."""
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:3]]
    while len(parts) < 3:
        parts.append(0)
    roll = rng.random()
    if roll < 0.6:
        parts[2] += 1 + rng.randrange(3)
    elif roll < 0.92:
        parts[1] += 1
        parts[2] = 0
    else:
        parts[0] += 1
        parts[1] = parts[2] = 0
    return ".".join(str(p) for p in parts)


def _older(version: str, rng: random.Random) -> str:
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:3]]
    while len(parts) < 3:
        parts.append(0)
    if parts[2] > 0:
        parts[2] = rng.randrange(parts[2])
    elif parts[1] > 0:
        parts[1] -= 1
        parts[2] = rng.randrange(6)
    return ".".join(str(p) for p in parts)


def generate_fleet(count: int, seed: int, now: float) -> GeneratedFleet:
    """Build `count` sites (ids 1..count) with clients, tags, updates of all four types and mixed health."""
    rng = random.Random(seed)
    tags = [Tag(id=i + 1, name=name, color=color) for i, (name, color) in enumerate(TAG_NAMES)]
    client_count = max(1, count // 8) if count else 0
    clients = []
    for cid in range(1, client_count + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        company = f"{rng.choice(WORDS).title()} {rng.choice(KINDS).title()}"
        clients.append(
            Client(
                id=cid,
                name=f"{company} {cid}",
                client_email=f"{first.lower()}.{last.lower()}{cid}@example.com",
                client_phone=f"+1 555 {rng.randrange(1000, 9999)}",
                city=rng.choice(["Lisbon", "Berlin", "Austin"]),
                country=rng.choice(["PT", "DE", "US", "NL"]),
                created=now - rng.randrange(30, 900) * 86400,
                suspended=1 if rng.random() < 0.03 else 0,
            )
        )
    sites = [_generate_site(i, rng, now, client_count, len(tags)) for i in range(1, count + 1)]
    costs = []
    for cid in range(1, min(count, 25) + 1):
        slug, name, _ = PLUGINS[cid % len(PLUGINS)]
        costs.append(
            Cost(
                id=cid,
                name=f"{name} licence",
                slug=slug.split("/")[0],
                price=round(rng.uniform(19, 299), 2),
                last_renewal=now - rng.randrange(1, 300) * 86400,
                next_renewal=now + rng.randrange(1, 300) * 86400,
                sites=[cid],
                url=f"https://vendor.example/{slug.split('/')[0]}",
            )
        )
    global_ignores: dict[str, dict[str, list[str]] | list[str]] = {
        "plugins": {"hello.php": ["all_versions"]},
        "themes": {},
        "core": [],
    }
    return GeneratedFleet(sites=sites, tags=tags, clients=clients, costs=costs, global_ignores=global_ignores)


def _generate_site(site_id: int, rng: random.Random, now: float, client_count: int, tag_count: int) -> Site:
    word, kind, tld = rng.choice(WORDS), rng.choice(KINDS), rng.choice(TLDS)
    domain = f"{word}-{kind}-{site_id}.example.{tld}"
    site = Site(
        id=site_id,
        name=f"{word.title()} {kind.title()} {site_id}",
        url=f"https://{domain}/",
        added=now - rng.randrange(10, 700) * 86400,
    )
    site.client_id = rng.randrange(1, client_count + 1) if client_count and rng.random() < 0.85 else 0
    site.tag_ids = sorted(rng.sample(range(1, tag_count + 1), k=rng.choice([0, 1, 1, 2])))
    site.wp_version = rng.choice(CORE_VERSIONS)
    site.wp_offer = CORE_LATEST if site.wp_version != CORE_LATEST else None
    site.php_version = rng.choice(PHP_VERSIONS)
    site.child_version = rng.choice(OLD_CHILD_VERSIONS) if rng.random() < 0.02 else rng.choice(CHILD_VERSIONS)
    site.synced_child_version = site.child_version  # its last sync went through
    site.mysql_version = rng.choice(["8.0.43", "10.11.14-MariaDB", "10.6.23-MariaDB"])
    site.memory_limit = rng.choice(["128M", "256M", "512M"])
    site.database_size = rng.randrange(2, 900) * 1_048_576
    for slug, name, latest in rng.sample(PLUGINS, k=rng.randrange(6, 16)):
        pending = rng.random() < 0.25
        version = _older(latest, rng) if pending else latest
        offer = latest if pending and version != latest else (_bump(latest, rng) if pending else None)
        site.plugins[slug] = Item(slug, name, version, active=rng.random() < 0.85, offer=offer)
    chosen_themes = rng.sample(THEMES, k=rng.randrange(1, 4))
    for index, (slug, name, latest) in enumerate(chosen_themes):
        pending = rng.random() < 0.2
        version = _older(latest, rng) if pending else latest
        offer = latest if pending and version != latest else (_bump(latest, rng) if pending else None)
        site.themes[slug] = Item(slug, name, version, active=index == 0, offer=offer)
    for slug in TRANSLATED:
        plugin = next((p for p in site.plugins.values() if p.slug.split("/")[0] == slug), None)
        if plugin is not None and rng.random() < 0.15:
            site.translations[slug] = Item(slug, plugin.name, plugin.version, offer=plugin.version)
    if rng.random() < 0.05 and site.plugins:
        site.ignored_plugins[rng.choice(sorted(site.plugins))] = ["all_versions"]
    if rng.random() < 0.01:
        site.ignore_core_updates = True
    health = rng.random()
    if health < 0.02:
        site.reachable = False
        site.http_code = 0
        site.offline_check_result = -1
    elif health < 0.035:
        site.suspended = True
    elif health < 0.055:
        site.child_connected = False
        site.sync_errors = "Manually disconnected"
    site.response_ms = rng.randrange(60, 900)
    site.health_score = rng.choice([100, 100, 100, 90, 80, 60])
    site.last_sync = now - rng.randrange(60, 86400)
    _remember_sync(site)
    site.monitor = _generate_monitor(site, rng, now)
    site.posts = [
        Post(1, "post", "Hello world!", "publish", "Welcome to WordPress.", "admin", site.added),
        Post(2, "page", "Sample Page", "publish", "This is an example page.", "admin", site.added),
        Post(
            3,
            "post",
            f"News from {site.name}",
            rng.choice(["publish", "draft"]),
            "Updates.",
            "editor",
            site.added + 86400,
        ),
    ]
    site.users = [SiteUser(1, "admin", f"admin@{domain}", "administrator", display_name="admin")]
    if rng.random() < 0.5:
        site.users.append(SiteUser(2, "editor", f"editor@{domain}", "editor", "Eve", "Editor", "Eve Editor"))
    return site


def connected_child(site_id: int, url: str, name: str, admin: str, seed: int, now: float) -> Site:
    """A WordPress site that already runs, just connected to the dashboard (MainWP's Add New Site: its URL and
    admin). What the child runs (core, plugins, themes, translations and the releases they are offered) is drawn as
    the generated fleet's, from a stream of its own so the fleet's draws stay as they were; the dashboard has
    stored nothing of it yet: until a sync it lists none of the site's updates."""
    site = _generate_site(site_id, random.Random(f"{seed}:added:{site_id}"), now, 0, len(TAG_NAMES))
    domain = url.split("://", 1)[-1].rstrip("/")
    site.url, site.name, site.admin, site.added = url, name, admin, now
    site.client_id, site.tag_ids = 0, []
    site.child_version = site.synced_child_version = CHILD_VERSIONS[0]  # MainWP connects only a current child
    site.reachable, site.http_code, site.offline_check_result = True, 200, 1
    site.suspended, site.child_connected, site.sync_errors = False, True, ""
    site.ignored_plugins, site.ignore_core_updates = {}, False  # the dashboard's own settings: none yet
    site.last_sync = site.last_check = 0.0
    site.monitor = Monitor(id=site_id)
    site.posts[2].title = f"News from {name}"
    site.users = [SiteUser(u.id, u.username, f"{u.username}@{domain}", u.role, u.first_name, u.last_name,
                           u.display_name) for u in site.users]
    site.known_wp_version, site.known_wp_offer = "", None
    for items in (site.plugins, site.themes, site.translations):
        for item in items.values():
            item.known_version, item.known_offer = "", None
    return site


def _remember_sync(site: Site) -> None:
    """The dashboard's stored copy equals the child's state at generation time (as after a sync)."""
    site.known_wp_version, site.known_wp_offer = site.wp_version, site.wp_offer
    for items in (site.plugins, site.themes, site.translations):
        for item in items.values():
            item.known_version, item.known_offer = item.version, item.offer


def _generate_monitor(site: Site, rng: random.Random, now: float) -> Monitor:
    monitor = Monitor(id=site.id)
    beats: list[Heartbeat] = []
    down = not site.reachable
    had_incident = rng.random() < 0.1
    for index in range(6):
        t = now - (6 - index) * 3600
        status = 0 if down or (had_incident and index == 2) else 1
        msg = "200 - up! OK" if status else "0 - down! Connection refused"
        beats.append(
            Heartbeat(
                index + 1,
                status,
                msg,
                1 if index in (0, 2, 3) else 0,
                t,
                site.response_ms,
                200 if status else 0,
                duration=3600,
                down_count=0 if status else 1,
            )
        )
    monitor.heartbeats = beats
    monitor.last_status = "down" if down else "up"
    monitor.last_check_at = beats[-1].time
    monitor.last_status_code = beats[-1].http_code
    return monitor

