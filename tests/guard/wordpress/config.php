<?php
// A test WordPress from Debian's `wordpress` package, its core read-only in /usr/share/wordpress and its content,
// database and settings of the test's own (tests/guard/wordpress_site.py writes site.json beside its content).
$fleet_test = json_decode( file_get_contents( getenv( 'FLEET_TEST_WP' ) . '/site.json' ), true );
define( 'DB_NAME', 'wordpress' );
define( 'DB_USER', 'root' );
define( 'DB_PASSWORD', '' );
define( 'DB_HOST', 'localhost:' . $fleet_test['socket'] );
define( 'DB_CHARSET', 'utf8mb4' );
define( 'DB_COLLATE', '' );
define( 'WP_HOME', $fleet_test['url'] );
define( 'WP_SITEURL', $fleet_test['url'] );
define( 'WP_CONTENT_DIR', $fleet_test['content'] );
define( 'WP_CONTENT_URL', $fleet_test['url'] . 'wp-content' );
define( 'FLEET_GUARD_DATA_DIR', $fleet_test['guard_data'] );
define( 'FS_METHOD', 'direct' );
define( 'WP_DEBUG', false );
define( 'WP_HTTP_BLOCK_EXTERNAL', true );
define( 'DISABLE_WP_CRON', true );
define( 'AUTOMATIC_UPDATER_DISABLED', true );
define( 'AUTH_KEY', 'test' );
define( 'ABSPATH', '/usr/share/wordpress/' );
$table_prefix = 'wp_';
unset( $fleet_test );
