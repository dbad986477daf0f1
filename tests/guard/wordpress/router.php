<?php
// `php -S` router: every request is a front-end request of the test WordPress (what wp-blog-header.php does).
require __DIR__ . '/config.php';
define( 'WP_USE_THEMES', true );
require ABSPATH . 'wp-settings.php';
wp();
require ABSPATH . WPINC . '/template-loader.php';
